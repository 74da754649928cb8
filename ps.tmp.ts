import { summarizeFile } from './bench/profile-summary.js';
console.log(summarizeFile('/tmp/prof/CPU.20261121.075004.20840.0.001.cpuprofile'));
