import { describe, expect, it } from 'vitest';
import { decodeAdvert, encodeAdvert, fitAdvert } from '../../node/fleet/adverts.ts';
import { Advert, MAX_ADVERT_BYTES, MAX_ADVERT_WARM } from '../../protocol/advert.ts';
import { ParseError } from '../../protocol/parse.ts';
import { sampleAdvert } from '../helpers/adverts.ts';

const encode = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

describe('advert schema', () => {
  it('accepts a full advert and round-trips through gossip encoding', () => {
    expect(Advert.parse(sampleAdvert)).toEqual(sampleAdvert);
    expect(decodeAdvert(encodeAdvert(sampleAdvert), sampleAdvert.peerId)).toEqual(sampleAdvert);
  });

  it('names the sender and every bad field', () => {
    const bad = { ...sampleAdvert, seq: -1, memory: { total: 'lots' }, models: [{ id: '' }] };
    try {
      decodeAdvert(encode(bad), sampleAdvert.peerId);
      throw new Error('expected a ParseError');
    } catch (err) {
      expect(err).toBeInstanceOf(ParseError);
      const e = err as ParseError;
      expect(e.input).toBe(`advert from ${sampleAdvert.peerId}`);
      const paths = e.issues.map((i) => i.path);
      expect(paths).toEqual(expect.arrayContaining(['seq', 'memory.total', 'models.0.id']));
    }
  });

  it('rejects non-JSON, wrong version, unknown server kinds and bad fingerprints', () => {
    expect(() => decodeAdvert(new TextEncoder().encode('{oops'), sampleAdvert.peerId)).toThrow(/not JSON/);
    expect(() => decodeAdvert(encode({ ...sampleAdvert, v: 2 }), sampleAdvert.peerId)).toThrow(/v:/);
    const badKind = { ...sampleAdvert, models: [{ ...sampleAdvert.models[0], server: 'gpt' }] };
    expect(() => decodeAdvert(encode(badKind), sampleAdvert.peerId)).toThrow(/models.0.server/);
    expect(() => decodeAdvert(encode({ ...sampleAdvert, workspaces: ['abc'] }), sampleAdvert.peerId)).toThrow(
      /workspaces.0/,
    );
  });

  it('rejects an advert that speaks for another peer', () => {
    expect(() => decodeAdvert(encodeAdvert(sampleAdvert), '12D3KooWother')).toThrow(/peerId: claims to be/);
  });

  it('caps sizes: list lengths in the schema, bytes at encode and decode', () => {
    const warm = Array.from({ length: MAX_ADVERT_WARM + 1 }, () => sampleAdvert.warm[0]!);
    expect(() => Advert.parse({ ...sampleAdvert, warm })).toThrow();
    const models = Array.from({ length: 64 }, (_, i) => ({
      ...sampleAdvert.models[0]!,
      id: `${'m'.repeat(250)}${i}`,
    }));
    const fullWarm = Array.from({ length: MAX_ADVERT_WARM }, (_, i) => ({
      prompt: sampleAdvert.warm[0]!.prompt,
      model: models[i]!.id,
    }));
    const huge = { ...sampleAdvert, models, warm: fullWarm };
    expect(() => encodeAdvert(huge)).toThrow(/exceeds the cap/);
    // fitAdvert drops the oldest warm entries until the advert fits, keeping the newest.
    const fitted = fitAdvert(huge);
    expect(encodeAdvert(fitted).length).toBeLessThanOrEqual(MAX_ADVERT_BYTES);
    expect(fitted.warm.length).toBeGreaterThan(0);
    expect(fitted.warm).toEqual(fullWarm.slice(0, fitted.warm.length));
    expect(fitted.models).toEqual(models);
    const oversized = new Uint8Array(MAX_ADVERT_BYTES + 1);
    expect(() => decodeAdvert(oversized, sampleAdvert.peerId)).toThrow(/exceeds the cap/);
  });
});
