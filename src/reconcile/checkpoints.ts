/** The cron's cursors live in D1 (src/db/checkpoints.ts), where the consumer records its queue probes too. */
export { checkpointWrite, parseCursor, readCheckpoint, writeCheckpoint } from "../db/checkpoints";
