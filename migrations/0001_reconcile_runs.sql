CREATE TABLE `reconcile_runs` (
	`id` text PRIMARY KEY NOT NULL,
	`clock` integer NOT NULL,
	`started_at` integer NOT NULL,
	`finished_at` integer,
	`counts` text,
	`failures` text
);
--> statement-breakpoint
CREATE INDEX `reconcile_runs_started` ON `reconcile_runs` (`started_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `alerts_one_open_incident` ON `alerts` (`source`,`kind`) WHERE state = 'open';