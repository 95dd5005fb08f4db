/** What one admitted job is doing at the moment (kept by the executor, read for the advert's load). */
export interface JobActivity {
  /** It waits for a job slot to start generating (the node keeps one such job: placement/room.ts). */
  waiting: boolean;
  /** It holds a job slot: its samples are being generated (requests at, or waiting for, the model server). */
  generating: boolean;
  /** Its samples being scored in the sandbox now. */
  scoring: number;
  /** Its generated samples waiting for a scoring slot (scoring is CPU-bound and shared by every job). */
  waitingToScore: number;
}

/** A fresh job: it waits for a job slot (taken at once when one is free). */
export function newActivity(): JobActivity {
  return { waiting: true, generating: false, scoring: 0, waitingToScore: 0 };
}

/**
 * A job is queued when nothing of it runs: it waits for a job slot, or every sample it still has
 * waits for a scoring slot.
 */
export function isQueued(a: JobActivity): boolean {
  return a.waiting || (!a.generating && a.scoring === 0 && a.waitingToScore > 0);
}

/** The advert's load (protocol/advert.ts `load`). */
export interface JobLoad {
  /** Jobs with nothing in progress: waiting for a job slot, or for a scoring slot. */
  queued: number;
  /** Jobs generating or scoring. */
  running: number;
  /** Of the running jobs, those generating: each holds one of the node's job slots. */
  generating: number;
  /** Of the queued jobs, those waiting for a job slot to generate. */
  waiting: number;
  /** Job slots offered (jobs generating at once). */
  capacity: number;
}

/**
 * The advert's load from the admitted jobs: `queued` jobs have nothing in progress (`waiting` of them
 * for a job slot, the others for a scoring slot), `running` ones generate or score; queued + running
 * is every admitted job (what placement counts), `generating` the ones holding a job slot.
 * `capacity` is the job slots offered.
 */
export function jobLoad(jobs: Iterable<JobActivity>, capacity: number): JobLoad {
  let queued = 0;
  let running = 0;
  let generating = 0;
  let waiting = 0;
  for (const a of jobs) {
    if (isQueued(a)) queued++;
    else running++;
    if (a.generating) generating++;
    if (a.waiting) waiting++;
  }
  return { queued, running, generating, waiting, capacity };
}

/**
 * A generated sample's place in its job's activity: it counts as waiting to score from the moment it
 * is generated (before the `generated` message is sent, so the advert never shows a job with samples
 * in hand as doing nothing) until its scoring starts or is given up.
 */
export interface ScoringTicket {
  /**
   * Runs `score` through `slot` (the scoring limiter): waiting for the slot, then scoring, then done
   * (whatever `score` does). At most once per ticket.
   */
  run<T>(slot: (fn: () => Promise<T>) => Promise<T>, score: () => Promise<T>): Promise<T>;
  /** The sample will not be scored in the sandbox (unscorable, or the job failed first); idempotent. */
  leave(): void;
}

/** Counts a freshly generated sample of `a` as waiting to score; its ticket keeps the count right. */
export function queueForScoring(a: JobActivity): ScoringTicket {
  a.waitingToScore++;
  let waiting = true;
  const leave = () => {
    if (waiting) a.waitingToScore--;
    waiting = false;
  };
  return {
    leave,
    async run(slot, score) {
      try {
        return await slot(async () => {
          leave();
          a.scoring++;
          try {
            return await score();
          } finally {
            a.scoring--;
          }
        });
      } finally {
        leave();
      }
    },
  };
}
