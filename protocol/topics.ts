/**
 * Topic names and stream protocol ids. Topics are scoped by fleet id, so two fleets that somehow
 * share peers never mix gossip, and versioned, so a later format change runs beside the old one.
 */
export const PROTOCOL_PREFIX = '/vtnode';

/** Gossipsub topic carrying adverts of one fleet. */
export function advertTopic(fleetId: string): string {
  return `${PROTOCOL_PREFIX}/${fleetId}/advert/1`;
}

/** Gossipsub topic carrying verified-sample digests of one fleet. */
export function digestTopic(fleetId: string): string {
  return `${PROTOCOL_PREFIX}/${fleetId}/digest/1`;
}

/** Stream protocol: place k samples of a task on a worker and stream back results. */
export const JOB_PROTOCOL = `${PROTOCOL_PREFIX}/job/1`;
/** Stream protocol: fetch sample bodies by exact (origin, seq) row, from the origin or any holder. */
export const SAMPLE_PROTOCOL = `${PROTOCOL_PREFIX}/sample/2`;
/** Stream protocol: the origins a node holds, and any origin's signed digests since a seq (anti-entropy). */
export const LOG_PROTOCOL = `${PROTOCOL_PREFIX}/log/2`;
/** Stream protocol: task rows by content hash (what v2 digests commit to), from the origin or any holder. */
export const TASK_PROTOCOL = `${PROTOCOL_PREFIX}/task/1`;

/** Gossipsub topic carrying the fleet's signed revocations. */
export function revocationTopic(fleetId: string): string {
  return `${PROTOCOL_PREFIX}/${fleetId}/revocation/1`;
}

/** Stream protocol: exchange membership certificates and revocation lists right after connecting. */
export const MEMBER_PROTOCOL = `${PROTOCOL_PREFIX}/member/1`;
/** Stream protocol: exchange an invitation for a certificate, or renew one, with a fleet-key holder. */
export const ADMIT_PROTOCOL = `${PROTOCOL_PREFIX}/admit/1`;
/** Stream protocol: a fleet-key holder pushes a re-key order to a member. */
export const REKEY_PROTOCOL = `${PROTOCOL_PREFIX}/rekey/1`;
