-- Bulk replay jobs (src/replay/replay-jobs.ts; docs/operating.md, "Bulk replay by filter"): one row per job in each
-- receipt database, so a step's resets and the row's cursor commit in one D1 batch and a job resumed after a crash or
-- a redeploy never replays a delivery twice. Written only by an operator's replay or a route's recovery, never on the
-- happy path. Written by hand in drizzle-kit's form (the journal in migrations/meta stops at 0001).
CREATE TABLE `replay_jobs` (
	`job_key` text PRIMARY KEY NOT NULL,
	`source` text NOT NULL,
	`route` text,
	`filter` text NOT NULL,
	`origin` text NOT NULL,
	`state` text DEFAULT 'running' NOT NULL,
	`cursor` text,
	`scanned` integer DEFAULT 0 NOT NULL,
	`replayed` integer DEFAULT 0 NOT NULL,
	`expired` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`finished_at` integer
);
CREATE INDEX `replay_jobs_running` ON `replay_jobs` (`state`) WHERE state = 'running';
