import type { Message, PeerId } from '@libp2p/interface';
import { TopicValidatorResult } from '@libp2p/interface';
import { type Advert, Advert as AdvertSchema, MAX_ADVERT_BYTES } from '../../protocol/advert.ts';
import { ParseError, parseJsonWith } from '../../protocol/parse.ts';
import type { OriginCheck } from '../membership/service.ts';

/** What a node says about itself, less the fields the publisher fills in (peer id, seq, time). */
export type AdvertBody = Omit<Advert, 'v' | 'peerId' | 'seq' | 'sentAt' | 'leaving'>;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** Encodes an advert for gossip; refuses one over the size cap (an oversized message would cut a peer pair's gossip). */
export function encodeAdvert(advert: Advert): Uint8Array {
  const bytes = encoder.encode(JSON.stringify(AdvertSchema.parse(advert)));
  if (bytes.length > MAX_ADVERT_BYTES) {
    throw new Error(`advert of ${bytes.length} bytes exceeds the cap of ${MAX_ADVERT_BYTES} bytes`);
  }
  return bytes;
}

/**
 * Makes an advert fit the byte cap: drops the oldest warm entries, then the last models, until it does.
 * A node with very many models or caches still advertises, with its newest information.
 */
export function fitAdvert(advert: Advert): Advert {
  let fitted = advert;
  const size = (a: Advert) => encoder.encode(JSON.stringify(a)).length;
  while (size(fitted) > MAX_ADVERT_BYTES && fitted.warm.length > 0) {
    fitted = { ...fitted, warm: fitted.warm.slice(0, Math.floor(fitted.warm.length * 0.75)) };
  }
  while (size(fitted) > MAX_ADVERT_BYTES && fitted.models.length > 0) {
    fitted = { ...fitted, models: fitted.models.slice(0, -1) };
  }
  return fitted;
}

/**
 * Checks a gossiped advert: size cap, JSON, schema, and that the advert speaks for the peer that
 * signed it. Throws a ParseError naming the sender and the field.
 */
export function decodeAdvert(data: Uint8Array, signer: string): Advert {
  const input = `advert from ${signer}`;
  if (data.length > MAX_ADVERT_BYTES) {
    throw new ParseError(input, [
      { path: '', message: `${data.length} bytes exceeds the cap of ${MAX_ADVERT_BYTES}` },
    ]);
  }
  const advert = parseJsonWith(AdvertSchema, decoder.decode(data), input);
  if (advert.peerId !== signer) {
    throw new ParseError(input, [{ path: 'peerId', message: `claims to be ${advert.peerId}` }]);
  }
  return advert;
}

/**
 * A gossipsub topic validator for adverts: malformed ones are rejected (not forwarded, sender
 * penalised); with `members`, so is one whose certificate is forged or revoked, and one from a peer
 * without a known certificate is ignored (not forwarded, no penalty: it may be joining).
 */
export function advertValidator(onReject: (err: Error, from: string) => void, members?: OriginCheck) {
  return async (_from: PeerId, msg: Message): Promise<TopicValidatorResult> => {
    if (msg.type !== 'signed') {
      onReject(new Error('unsigned advert'), 'unknown');
      return TopicValidatorResult.Reject;
    }
    const signer = msg.from.toString();
    let advert: Advert;
    try {
      advert = decodeAdvert(msg.data, signer);
    } catch (err) {
      onReject(err as Error, signer);
      return TopicValidatorResult.Reject;
    }
    if (!members) return TopicValidatorResult.Accept;
    const { verdict, reason } = await members.origin(signer, { cert: advert.cert });
    if (verdict === 'reject') onReject(new Error(reason), signer);
    return verdict === 'accept'
      ? TopicValidatorResult.Accept
      : verdict === 'ignore'
        ? TopicValidatorResult.Ignore
        : TopicValidatorResult.Reject;
  };
}
