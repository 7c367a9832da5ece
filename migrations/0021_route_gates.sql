-- Every route known to have a gate (src/gate/): a Durable Object cannot be listed, so this is how the cron's route-gates
-- step (src/reconcile/route-gates.ts) finds the gate of a route a deploy removed, renamed or took every control option
-- from, and forgets it (its admin pause, held deliveries and breaker) once `absent_runs` cron runs in a row found the
-- route absent. One row per gated route; written by hand in drizzle-kit's form (the journal in migrations/meta stops
-- at 0001).
CREATE TABLE `route_gates` (
	`source` text NOT NULL,
	`route` text NOT NULL,
	`absent_runs` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`source`, `route`)
) WITHOUT ROWID;
