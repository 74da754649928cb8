// Adds up vitest JSON reports and prints the plain summary line CI reads: "tests: N passed, N failed".
// Arguments are `report.json=EXIT_CODE` pairs: a run that exited non-zero with every test passed
// (an unhandled error, which the JSON report does not record) counts as one failure, so this line
// never says "0 failed" for a run that failed. Each failed test is named (file, title, the first
// line of its message) just above that line, so the tail of a CI log says what failed.
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

/** The first non-empty line of a failure message, without colour codes, at most 300 characters. */
function firstLine(message) {
  const text = stripVTControlCharacters(String(message ?? ''));
  const line = text.split('\n').find((part) => part.trim() !== '') ?? '(no message)';
  return line.trim().slice(0, 300);
}

let passed = 0;
let failed = 0;
let skipped = 0;
const named = [];
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
  for (const result of report.testResults ?? []) {
    const where = relative(process.cwd(), result.name ?? '?');
    const tests = (result.assertionResults ?? []).filter((test) => test.status === 'failed');
    for (const test of tests)
      named.push(`${file}: FAILED ${where} > ${test.fullName}: ${firstLine(test.failureMessages?.[0])}`);
    if (result.status === 'failed' && tests.length === 0)
      named.push(`${file}: FAILED ${where}: ${firstLine(result.message)}`);
  }
  passed += report.numPassedTests;
  failed += failures;
  skipped += report.numPendingTests + (report.numTodoTests ?? 0);
  if (rc !== '0' && failures === 0) {
    console.log(`${file}: the run exited ${rc} with no failed test (an unhandled error; see its output above)`);
    failed += 1;
  }
}
for (const line of named) console.log(line);
console.log(`tests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
