import type { Advert } from '../../protocol/advert.ts';

const fp = (c: string) => `sha256:${c.repeat(64)}`;
export const sampleAdvert: Advert = {
  v: 1,
  peerId: '12D3KooWJYNi68RHpnRSb9ZQvVXMjpXEeFPMuG8gGozqvWT6saKQ',
  seq: 7,
  sentAt: 1_800_000_000_000,
  leaving: false,
  version: '0.1.0',
  host: 'studio-1',
  addrs: ['/ip4/10.0.0.2/tcp/7461'],
  models: [
    {
      id: 'qwen3-coder:30b',
      server: 'ollama',
      context: 32768,
      concurrency: 2,
      loaded: true,
      memoryBytes: 19e9,
    },
  ],
  memory: { total: 128e9, free: 90e9, reserved: 19e9 },
  load: { queued: 1, running: 2, capacity: 2 },
  warm: [{ prompt: fp('a'), model: 'qwen3-coder:30b' }],
  workspaces: [fp('b')],
  sandbox: { backend: 'seatbelt', ok: true },
  roles: ['worker'],
};
