/** Shared by the poison phase (bench/lib/poison.ts, node) and the Worker entry it deploys (worker.ts). */
export const POISON_HANDLER = "bench-hang-on-marked";
export const POISON_SOURCE = "bench-poison";
