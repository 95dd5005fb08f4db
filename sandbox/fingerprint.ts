import { fingerprint } from '../protocol/canonical.ts';
import type { JudgeSpec } from '../protocol/task.ts';
import type { Limits } from './limits.ts';

/** Version of the scoring rules: bump whenever a change could change a reward. */
export const SCORER_VERSION = 'vtnode-scorer/4';

/** Everything a score depends on besides the candidate and the task's identity. */
export interface EvaluationParts {
  /** Backend description (name, version, uid policy). */
  backend: Record<string, unknown>;
  limits: Limits;
  /** Content id of the workspace scored against. */
  workspaceId: string;
  /** Toolchain versions. */
  node: string;
  tsc: string | null;
  runner: string;
  judge: JudgeSpec;
  /** Multiplier per added lint. */
  lintFactor: number;
  /** Content digest of the integrity harness and the static tamper rules (integrity/rewrite.ts). */
  integrity: string;
}

/** The evaluation fingerprint: a score is reused only under the same one. */
export function evaluationFingerprint(parts: EvaluationParts): string {
  return fingerprint({ scorer: SCORER_VERSION, ...parts });
}
