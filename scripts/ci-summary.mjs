// Adds up vitest JSON reports and prints the plain summary line CI reads: "tests: N passed, N failed".
// Arguments are `report.json=EXIT_CODE` pairs: a run that exited non-zero with every test passed
// (an unhandled error, which the JSON report does not record) counts as one failure, so this line
// never says "0 failed" for a run that failed.
import { existsSync, readFileSync } from 'node:fs';

let passed = 0;
let failed = 0;
let skipped = 0;
for (const arg of process.argv.slice(2)) {
  const [file, rc = '0'] = arg.split('=');
  if (!existsSync(file)) {
    console.log(`${file}: no report (the run did not finish)`);
    failed += 1;
    continue;
  }
  const report = JSON.parse(readFileSync(file, 'utf8'));
  // A file that failed with no failed test (it did not load) counts once; describe blocks do not.
  const brokenFiles = (report.testResults ?? []).filter(
    (file) => file.status === 'failed' && !(file.assertionResults ?? []).some((test) => test.status === 'failed'),
  ).length;
  const failures = report.numFailedTests + brokenFiles;
  passed += report.numPassedTests;
  failed += failures;
  skipped += report.numPendingTests + (report.numTodoTests ?? 0);
  if (rc !== '0' && failures === 0) {
    console.log(`${file}: the run exited ${rc} with no failed test (an unhandled error; see its output above)`);
    failed += 1;
  }
}
console.log(`tests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
