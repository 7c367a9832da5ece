-- Who handed a kept secret over: the client address (CF-Connecting-IP) and user agent of its latest handshake, so an
-- operator can tell the genuine pending secret from ones handed over by whoever read the verify token in a log.
-- NULL for rows kept before this migration.
ALTER TABLE `handshake_secrets` ADD `client_address` text;
ALTER TABLE `handshake_secrets` ADD `user_agent` text;
-- Sources whose first kept secret has been installed. The verify token installs a secret without an operator only
-- while its source is absent here, and a row is never deleted: revoking every secret after a leak must not reopen the
-- first install to whoever holds the token. Every source that keeps a secret today has had its first install.
CREATE TABLE `kept_secret_installs` (
	`source` text PRIMARY KEY NOT NULL,
	`installed_at` integer NOT NULL
);
INSERT INTO `kept_secret_installs` (`source`, `installed_at`)
SELECT `source`, min(`received_at`) FROM `handshake_secrets` GROUP BY `source`;
