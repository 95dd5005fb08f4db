// Child process for the submitter crash test: records results of a campaign in a loop, printing
// `ack <taskId> <index>` after each result is committed. The parent SIGKILLs it mid-loop.
import { openCampaignStore } from '../../node/submitter/campaign-store.ts';
import { fingerprint } from '../../protocol/canonical.ts';
import { jobRequest, resultFor, sampleTask } from './samples.ts';

const [path] = process.argv.slice(2);
export const WRITER_TASKS = Array.from({ length: 200 }, (_, i) => ({
  id: `task-${i}`,
  promptFingerprint: fingerprint(`prompt ${i}`),
  split: 'train' as const,
}));
export const WRITER_SPEC = {
  name: 'crash',
  tasksHash: fingerprint('tasks'),
  models: ['qwen'],
  k: 8,
  sampling: { temperature: 0.8, topP: 0.95, maxTokens: 2048, seedBase: 1000 },
  split: 'all' as const,
};

if (path) {
  const store = openCampaignStore({ path });
  const { campaign } = store.start({ spec: WRITER_SPEC, tasks: WRITER_TASKS, now: 1 });
  for (const task of WRITER_TASKS) {
    const request = jobRequest(sampleTask(task.id), 'S', [0, 1, 2, 3, 4, 5, 6, 7]);
    campaign.placed(
      {
        jobId: request.jobId,
        taskId: task.id,
        model: 'qwen',
        peerId: 'P',
        samples: request.samples,
        attempt: 1,
      },
      2,
    );
    for (const i of request.samples) {
      campaign.result(
        task.id,
        'qwen',
        'P',
        { type: 'sample', jobId: request.jobId, ...resultFor(request, i) },
        3,
      );
      process.stdout.write(`ack ${task.id} ${i}\n`);
    }
  }
}
