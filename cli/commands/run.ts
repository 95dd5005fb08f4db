import { resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { pause, sleep } from '../../node/async/sleep.ts';
import {
  type ControlClient,
  connectControl,
  DaemonBusyError,
  NoDaemonError,
} from '../../node/control/client.ts';
import type { startDaemon } from '../../node/daemon.ts';
import type { CampaignStartRequest, CampaignStatus, StartResponse } from '../../node/submitter/service.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom } from '../node-options.ts';
import {
  commandLine,
  count,
  DATA_DIR,
  duration,
  flag,
  group,
  int,
  list,
  number,
  oneOf,
  string,
} from '../options.ts';
import { createProgressPrinter, finalSummary } from '../progress.ts';

const line = commandLine({
  prose: `Usage: vtnode run --tasks FILE --model ID [-k 8] [options]

Runs a campaign: every task's k samples are placed as one job on the node that holds the task's
prompt cache (or its rendezvous owner), generated on that node's model server, scored in its
sandbox, and reported back. The submitter is the node of --data-dir: the running daemon, or, when
none runs, a node started for the campaign's duration. Progress goes to stderr.`,
  groups: [
    group('Options:', {
      tasks: string({ doc: 'tasks.jsonl (from `vtnode mine`)', value: 'FILE', required: true }),
      model: list({
        doc: 'model to sample, repeatable (a campaign may target several)',
        value: 'ID',
        required: true,
      }),
      k: int({ doc: 'samples per task and model', short: 'k', min: 1, max: 256, default: 8 }),
      split: oneOf(['train', 'eval', 'all'], { doc: 'the tasks to sample', value: 'S', default: 'train' }),
      temperature: number({ doc: 'sampling temperature', value: 'T', min: 0, max: 2, default: 0.8 }),
      'top-p': number({ doc: 'nucleus sampling', value: 'P', min: 0.01, max: 1, default: 0.95 }),
      'max-tokens': int({
        doc: 'completion cap per sample; a sample that hits it is truncated, reward 0',
        min: 1,
        default: 4096,
      }),
      seed: count({
        doc: 'seed of sample 0; sample i uses seed + i (default: a fresh one per campaign, printed; pass it again to reproduce a campaign exactly)',
      }),
      campaign: string({ doc: 'campaign name (default run-<tasks file hash>)', value: 'NAME' }),
      resume: flag({ doc: 'continue the named campaign (finished samples are not redone)' }),
      'job-timeout': duration({
        doc: 'time a node has for a job without progress before its samples are placed elsewhere (default 30m)',
        min: 1000,
      }),
      'max-attempts': int({
        doc: "placements of a task's samples before those still unscored are given up (default 5); a campaign that gives samples up ends incomplete, exit 1",
        min: 1,
        max: 100,
      }),
      'on-interrupt': oneOf(['detach', 'cancel'], {
        doc: 'what Ctrl-C does without a terminal to ask',
        value: 'A',
        default: 'detach',
      }),
      json: flag({ doc: 'print the final summary as one JSON object on stdout' }),
      'data-dir': DATA_DIR,
    }),
  ],
});

function request(values: ReturnType<typeof line.parse>['values']): CampaignStartRequest {
  return {
    tasksFile: resolve(values.tasks),
    ...(values.campaign ? { name: values.campaign } : {}),
    models: values.model,
    k: values.k,
    split: values.split,
    sampling: {
      temperature: values.temperature,
      topP: values['top-p'],
      maxTokens: values['max-tokens'],
      ...(values.seed === undefined ? {} : { seedBase: values.seed }),
    },
    resume: values.resume ?? false,
    ...(values['job-timeout'] !== undefined ? { jobTimeoutMs: values['job-timeout'] } : {}),
    ...(values['max-attempts'] !== undefined ? { maxAttempts: values['max-attempts'] } : {}),
  };
}

/** How long `run` keeps asking a live daemon that does not answer before it gives up, ms. */
const BUSY_BUDGET_MS = 10 * 60_000;

/**
 * The campaign's statuses as the daemon streams them (POST /campaign/follow: now, at each change, and
 * every few seconds), until one that is not running. A stream that breaks is asked for again like
 * a busy daemon is, for up to `busyBudgetMs`; another error is retried 5 times in a row; a daemon that
 * is gone (NoDaemonError) ends the follow at once.
 */
export async function* followStatus(
  control: ControlClient,
  name: string,
  options: {
    /** How long a live daemon that does not answer is asked again, ms (default 10 min). */
    busyBudgetMs?: number;
    /** The first wait between attempts, ms; it doubles up to 5 s (default 500). */
    firstDelayMs?: number;
    /** Told of each failed attempt that will be retried. */
    onRetry?: (err: Error) => void;
    /** Stops following. */
    signal?: AbortSignal;
  } = {},
): AsyncGenerator<CampaignStatus> {
  const budget = options.busyBudgetMs ?? BUSY_BUDGET_MS;
  let since = Date.now();
  let failures = 0;
  for (let attempt = 1; ; attempt++) {
    try {
      for await (const st of control.stream<CampaignStatus>('/campaign/follow', { name }, options.signal)) {
        since = Date.now();
        failures = 0;
        attempt = 1;
        yield st;
        if (st.status !== 'running') return;
      }
    } catch (err) {
      if (err instanceof NoDaemonError || options.signal?.aborted) throw err;
      if (err instanceof DaemonBusyError) {
        if (Date.now() - since >= budget) throw err;
      } else if (++failures >= 5) throw err;
      options.onRetry?.(err as Error);
    }
    await pause(
      Math.min(5000, (options.firstDelayMs ?? 500) * 2 ** Math.min(attempt - 1, 4)),
      options.signal,
    );
  }
}

/** A daemon that is gone or never answers, as the CLI says it: the campaign is kept, and how to resume. */
function daemonLost(err: unknown, name: string): unknown {
  if (!(err instanceof NoDaemonError || err instanceof DaemonBusyError)) return err;
  return new CliError(
    `${err.message}\ncampaign ${name} is kept in the data dir: once the node runs again, ` +
      `\`vtnode run --campaign ${name} --resume ...\` continues or re-attaches to it`,
  );
}

/**
 * The exit code of a finished wait: 0 when every planned sample was scored, 130 when cancelled,
 * else 1 with what is missing said on stderr (after the summary, which --json keeps the only stdout line).
 */
function exitCode(st: CampaignStatus): number {
  const { planned, scored } = st.summary.samples;
  const resume = `\`vtnode run --campaign ${st.name} --resume ...\` places them again`;
  let problem: string | null = null;
  if (st.status === 'stalled') problem = `stalled: ${st.problem ?? 'no eligible node'}; ${resume}`;
  else if (st.status === 'incomplete')
    problem =
      `is incomplete: ${planned - scored} of ${planned} samples were given up after repeated failed ` +
      `placements (last problem: ${st.problem ?? 'none recorded'}); ${resume}`;
  if (problem) {
    process.stderr.write(`vtnode: campaign ${st.name} ${problem}\n`);
    return 1;
  }
  return st.status === 'done' ? 0 : 130;
}

async function askDetachOrCancel(): Promise<'detach' | 'cancel'> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question('\n[d]etach (the campaign goes on in the daemon) or [c]ancel it? ');
    return answer.trim().toLowerCase().startsWith('c') ? 'cancel' : 'detach';
  } finally {
    rl.close();
  }
}

export const command: Command = {
  name: 'run',
  summary: 'run a campaign: generate and score k samples per task on the fleet',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const onInterrupt = values['on-interrupt'];
    const req = request(values);
    const dataDir = dataDirFrom(values);

    // The submitter: the running daemon, or a node started for the campaign's duration.
    let control: ControlClient;
    let ownDaemon: Awaited<ReturnType<typeof startDaemon>> | null = null;
    try {
      control = await connectControl(dataDir);
    } catch (err) {
      if (!(err instanceof NoDaemonError)) throw err;
      const fleet = await dataDir.readFleet();
      if (!fleet)
        throw new CliError(`${dataDir.root} is not in a fleet: run \`vtnode init\` or \`vtnode join\` first`);
      const config = await dataDir.readConfig();
      // The node advertises its saved workspaces: one where tests cannot run must not be advertised.
      const { refuseUnreadyWorkspace } = await import('../scorer.ts');
      for (const dir of config.workspaces) refuseUnreadyWorkspace(dir);
      process.stderr.write('no daemon running for this data dir: starting this node for the campaign\n');
      // Loaded only here: against a running daemon, `run` never loads libp2p or the model clients.
      const { startDaemon } = await import('../../node/daemon.ts');
      const { createModelService } = await import('../../node/models/service.ts');
      ownDaemon = await startDaemon({
        dataDir,
        fleet,
        config,
        models: createModelService({
          urls: config.modelServers,
          autodetect: config.modelServers.length === 0,
        }),
        // The progress line says what its jobs do; per-job lines would break its redraw.
        jobLines: false,
      });
      control = await connectControl(dataDir);
      // Give the fleet view a moment to fill from the peers' adverts.
      await sleep(Math.min(3 * config.advertIntervalMs, 6000));
    }

    try {
      let started: StartResponse;
      try {
        started = await control.call('POST', '/campaign/start', req);
      } catch (err) {
        throw new CliError(`cannot start the campaign: ${(err as Error).message.replace(/^daemon: /, '')}`);
      }
      const { name, report } = started;
      if (started.attached) process.stderr.write(`campaign ${name} is running in the daemon: re-attached\n`);
      else
        process.stderr.write(
          `campaign ${name}: ${report.planned} samples planned, seed ${started.seedBase}` +
            (report.reused > 0 ? `, ${report.reused} already scored (resumed)` : '') +
            (report.changed.length > 0
              ? `, ${report.changed.length} task(s) changed their prompt: redone`
              : '') +
            '\n',
        );

      let interrupted: 'detach' | 'cancel' | null = null;
      let asking = false;
      /** Ends the current follow stream, so an answer to Ctrl-C is acted on at once. */
      let wake = new AbortController();
      const onSigint = () => {
        if (interrupted || asking) {
          interrupted = 'cancel';
          wake.abort();
          return;
        }
        if (process.stdin.isTTY && !ownDaemon) {
          asking = true;
          // The progress redraw would overwrite the question: it waits for the answer.
          printer.pause();
          void askDetachOrCancel().then((a) => {
            interrupted = a;
            asking = false;
            printer.resume();
            wake.abort();
          });
        } else {
          interrupted = ownDaemon ? 'cancel' : onInterrupt;
          wake.abort();
        }
      };
      const tty = process.stderr.isTTY;
      const printer = createProgressPrinter({ tty });
      process.on('SIGINT', onSigint);
      let st: CampaignStatus | null = null;
      let cancelSent = false;
      try {
        for (;;) {
          try {
            for await (const next of followStatus(control, name, {
              signal: wake.signal,
              onRetry: (err) => process.stderr.write(`\nvtnode run: ${err.message}; asking again\n`),
            })) {
              st = next;
              const text = printer.update(st, Date.now());
              if (text !== null) process.stderr.write(text);
            }
          } catch (err) {
            if (!wake.signal.aborted) throw daemonLost(err, name);
          }
          if (st && st.status !== 'running') break;
          wake = new AbortController();
          if (interrupted === 'cancel' && !cancelSent) {
            cancelSent = true;
            await control.call('POST', '/campaign/cancel', { name });
          } else if (interrupted === 'detach') {
            process.stderr.write(
              `\ndetached: campaign ${name} goes on in the daemon; \`vtnode run --campaign ${name} --resume ...\` re-attaches\n`,
            );
            return 0;
          }
        }
      } finally {
        process.removeListener('SIGINT', onSigint);
        if (tty) process.stderr.write('\n');
      }
      const s = st.summary;
      if (values.json) {
        process.stdout.write(
          `${JSON.stringify({
            campaign: name,
            status: st.status,
            seed: st.seedBase,
            samples: {
              planned: s.samples.planned,
              generated: s.samples.generated,
              scored: s.samples.scored,
              verified: s.samples.verified,
              preexisting: s.preexisting,
            },
            tasks: s.tasks.map((t) => ({
              taskId: t.taskId,
              nodes: t.nodes,
              samples: t.samples,
              verified: t.verified,
            })),
            cacheHitRate: s.cacheHitRate,
            tokensPerSecond: s.tokensPerSecond,
            nodes: s.nodes,
            models: s.models,
            problem: st.problem,
            campaignSeconds: campaignSeconds(st),
          })}\n`,
        );
      } else {
        process.stderr.write(finalSummary(st));
      }
      return exitCode(st);
    } finally {
      await ownDaemon?.stop();
    }
  },
};

/**
 * The daemon's time from starting (or re-attaching to and resuming) the campaign to its end, in
 * seconds: the campaign's own cost, without this CLI's process start. Null when the daemon did not
 * finish it (cancelled before it ran, or stalled with a daemon that no longer runs it).
 */
function campaignSeconds(st: CampaignStatus): number | null {
  if (st.startedAt <= 0 || st.finishedAt < st.startedAt) return null;
  return Math.round(st.finishedAt - st.startedAt) / 1000;
}
