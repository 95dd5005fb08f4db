import { describe, expect, it } from 'vitest';
import { suspicion } from '../../cli/commands/status.ts';
import { trustOf } from '../../node/collector/trust.ts';

const record = (over: Partial<Parameters<typeof trustOf>[0]> = {}) =>
  trustOf({
    origin: 'o',
    highWater: 1,
    samples: 10,
    auditsPassed: 0,
    auditFailures: 0,
    rejectedBodies: 0,
    conflicts: 0,
    ...over,
  });

describe('status: why an origin is suspect', () => {
  it('says nothing for a clean origin', () => {
    expect(suspicion(record({ auditsPassed: 3 }))).toBe('');
  });

  it('claims quarantine only after a failed audit', () => {
    expect(suspicion(record({ auditFailures: 1, conflicts: 2 }))).toBe(
      '  SUSPECT (1 failed audit, 2 conflicts): its unaudited samples are quarantined',
    );
  });

  it('a conflict or a rejected body makes it suspect (every sample audited), not quarantined', () => {
    expect(suspicion(record({ conflicts: 1 }))).toBe('  SUSPECT (1 conflict): every sample of it is audited');
    expect(suspicion(record({ rejectedBodies: 2 }))).toBe(
      '  SUSPECT (2 rejected bodies): every sample of it is audited',
    );
  });
});
