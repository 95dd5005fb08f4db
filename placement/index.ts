export * from './eligibility.ts';
export * from './fleet-view.ts';
export * from './hrw.ts';
export * from './lease-book.ts';
export * from './placer.ts';
export * from './reputation.ts';
export * from './seeded-random.ts';
export * from './throughput.ts';
