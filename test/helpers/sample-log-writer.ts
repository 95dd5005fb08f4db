// Child process for the crash test: appends samples to a sample log forever, printing
// `ack <seq> <sampleId>` after each append has returned (committed). The parent SIGKILLs it.
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { seededSigner } from './digests.ts';
import { sampleBody } from './samples.ts';

// The parent's origin is the key of seed 1 (test/worker/sample-log.test.ts).
const [path, origin] = process.argv.slice(2);
const sampleLog = openSampleLog({ path: path!, origin: origin!, signer: await seededSigner(1) });
let i = 0;
const step = () => {
  for (let n = 0; n < 20; n++, i++) {
    const row = sampleLog.append(
      sampleBody(`task-${i >> 3}`, 'qwen', i % 8, { candidate: `candidate ${i}\n`.repeat(50) }),
    );
    process.stdout.write(`ack ${row.seq} ${row.body.sampleId}\n`);
  }
  setImmediate(step);
};
step();
