-- The operator audit log (src/admin/audit-log/): one row per operator action, allowed or refused for the caller's role.
-- The id is a ULID minted at `at`, so paging newest first and the cron's retention delete both go along the primary
-- key; no other index. Written by hand in drizzle-kit's form (the journal in migrations/meta stops at 0001).
CREATE TABLE `operator_actions` (
	`id` text PRIMARY KEY NOT NULL,
	`at` integer NOT NULL,
	`actor` text NOT NULL,
	`role` text NOT NULL,
	`via` text NOT NULL,
	`action` text NOT NULL,
	`target` text NOT NULL,
	`affected` integer NOT NULL,
	`outcome` text NOT NULL
) WITHOUT ROWID;
