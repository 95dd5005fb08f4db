import type { PeerId } from '@libp2p/interface';
import type { SignedDigest } from '../../protocol/digest.ts';
import { digestTopic } from '../../protocol/topics.ts';
import type { Host } from '../fleet/host.ts';
import { logger } from '../logger.ts';
import type { OriginCheck } from '../membership/service.ts';
import { countedValidator, metrics } from '../metrics.ts';
import { decodeDigest, digestValidator, encodeDigest } from './codec.ts';

export interface DigestGossipOptions {
  /** The node's libp2p host (gossipsub with StrictSign). */
  host: Pick<Host, 'services' | 'peerId'>;
  /** Fleet id: digests travel on digestTopic(fleetId). */
  fleetId: string;
  /** Called with every valid digest received from another node (not our own publishes). */
  onDigest?: (digest: SignedDigest) => void;
  /** Called when a received digest is rejected by the validator. */
  onReject?: (err: Error, from: string) => void;
  /** Membership: digests count only from members with the worker role. */
  members?: OriginCheck;
}

export interface DigestGossip {
  /** Publishes one of this node's digests; its origin must be this node. Never throws for a network failure. */
  publish(digest: SignedDigest): Promise<void>;
  /** Digests published and received, digests rejected. */
  counts(): { published: number; received: number; rejected: number; publishFailures: number };
  /** Stops listening (the topic stays subscribed until the host stops, so the mesh keeps relaying). */
  stop(): void;
}

/**
 * Digest gossip of one fleet: publishes this node's signed digests (the gossip message is signed by
 * its key too, capped in size) and delivers other nodes' digests that pass the topic validator
 * (schema, cap, origin = signer, digest signature).
 */
export function createDigestGossip(options: DigestGossipOptions): DigestGossip {
  const log = logger('vtnode:digests');
  const { host, fleetId } = options;
  const pubsub = host.services.pubsub;
  const topic = digestTopic(fleetId);
  const self = host.peerId.toString();
  const counts = { published: 0, received: 0, rejected: 0, publishFailures: 0 };
  let stopped = false;

  // Another DigestGossip on this host (the daemon's, when the node also collects) may have set the
  // same validator; ours replaces it and counts rejections here.
  const validator = countedValidator(
    'digest',
    digestValidator((err, from) => {
      counts.rejected++;
      log.warn(`rejected a digest from ${from}: ${err.message}`);
      options.onReject?.(err, from);
    }, options.members),
  );
  const previous = pubsub.topicValidators.get(topic);
  pubsub.topicValidators.set(topic, validator);
  const onMessage = (evt: CustomEvent) => {
    const msg = evt.detail as { topic: string; type: string; data: Uint8Array; from?: PeerId };
    if (stopped || msg.topic !== topic || msg.type !== 'signed' || !msg.from) return;
    let digest: SignedDigest;
    try {
      digest = decodeDigest(msg.data, msg.from.toString());
    } catch (err) {
      log.warn(`ignored a digest: ${(err as Error).message}`);
      return;
    }
    counts.received++;
    try {
      options.onDigest?.(digest);
    } catch (err) {
      log.error('digest handler failed', err);
    }
  };
  pubsub.addEventListener('message', onMessage);
  pubsub.subscribe(topic);

  return {
    async publish(digest) {
      if (digest.origin !== self)
        throw new Error(`cannot publish a digest of origin ${digest.origin} from ${self}`);
      const bytes = encodeDigest(digest);
      if (stopped) return;
      try {
        await pubsub.publish(topic, bytes);
        counts.published++;
        metrics().gossip.inc({ topic: 'digest', direction: 'out' });
      } catch (err) {
        // Gossip is best effort: collectors catch up over /vtnode/log/2.
        counts.publishFailures++;
        log('publishing digest seq %d failed: %s', digest.seq, (err as Error).message);
      }
    },
    counts: () => ({ ...counts }),
    stop() {
      if (stopped) return;
      stopped = true;
      pubsub.removeEventListener('message', onMessage);
      if (pubsub.topicValidators.get(topic) === validator) {
        if (previous) pubsub.topicValidators.set(topic, previous);
        else pubsub.topicValidators.delete(topic);
      }
    },
  };
}
