import type { Message, PeerId } from '@libp2p/interface';
import { TopicValidatorResult } from '@libp2p/interface';
import { claimFor, MAX_DIGEST_BYTES, SignedDigest } from '../../protocol/digest.ts';
import { ParseError, parseJsonWith, parseWith } from '../../protocol/parse.ts';
import type { OriginCheck } from '../membership/service.ts';
import type { LoggedSample } from '../worker/sample-log.ts';
import { signatureError } from './signature.ts';

const encoder = new TextEncoder();

/** The signed digest of a logged sample (what its origin gossips and serves). */
export function digestOf(sample: LoggedSample): SignedDigest {
  return { ...claimFor(sample.body, sample.origin, sample.seq, sample.taskHash), sig: sample.sig };
}

/** Encodes a signed digest for gossip; refuses a malformed one or one over MAX_DIGEST_BYTES. */
export function encodeDigest(digest: SignedDigest): Uint8Array {
  const bytes = encoder.encode(JSON.stringify(parseWith(SignedDigest, digest, 'digest')));
  if (bytes.length > MAX_DIGEST_BYTES)
    throw new Error(`digest of ${bytes.length} bytes exceeds the cap of ${MAX_DIGEST_BYTES} bytes`);
  return bytes;
}

/**
 * Checks a gossiped digest: size cap, JSON, schema, that its origin is the peer that signed the
 * gossip message (a node gossips only its own samples), and that the digest's own signature verifies
 * against the origin's key (so it can be relayed later). Throws a ParseError naming the signer and
 * the field.
 */
export function decodeDigest(data: Uint8Array, signer: string): SignedDigest {
  const input = `digest from ${signer}`;
  if (data.length > MAX_DIGEST_BYTES)
    throw new ParseError(input, [
      { path: '', message: `${data.length} bytes exceeds the cap of ${MAX_DIGEST_BYTES}` },
    ]);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(data);
  } catch {
    throw new ParseError(input, [{ path: '', message: 'not UTF-8 text' }]);
  }
  const digest = parseJsonWith(SignedDigest, text, input);
  if (digest.origin !== signer)
    throw new ParseError(input, [{ path: 'origin', message: `claims origin ${digest.origin}` }]);
  const bad = signatureError(digest);
  if (bad) throw new ParseError(input, [{ path: 'sig', message: bad }]);
  return digest;
}

/**
 * A gossipsub topic validator for digests: an unsigned, oversized, malformed, forged-origin or
 * badly signed digest is rejected (not delivered, not forwarded, and its sender's gossip score drops);
 * with `members`, so is one whose origin is revoked or not a worker, and one from an origin without
 * a known certificate is ignored (collectors catch up over /vtnode/log/2 once it is known).
 */
export function digestValidator(onReject: (err: Error, from: string) => void, members?: OriginCheck) {
  return async (_from: PeerId, msg: Message): Promise<TopicValidatorResult> => {
    if (msg.type !== 'signed') {
      onReject(new Error('unsigned digest'), 'unknown');
      return TopicValidatorResult.Reject;
    }
    const signer = msg.from.toString();
    try {
      decodeDigest(msg.data, signer);
    } catch (err) {
      onReject(err as Error, signer);
      return TopicValidatorResult.Reject;
    }
    if (!members) return TopicValidatorResult.Accept;
    const { verdict, reason } = await members.origin(signer, { role: 'worker' });
    if (verdict === 'reject') onReject(new Error(reason), signer);
    return verdict === 'accept'
      ? TopicValidatorResult.Accept
      : verdict === 'ignore'
        ? TopicValidatorResult.Ignore
        : TopicValidatorResult.Reject;
  };
}
