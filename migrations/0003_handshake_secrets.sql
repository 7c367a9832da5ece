-- Secrets a sender hands over in a proven handshake (Asana's X-Hook-Secret, Notion's verification_token), kept so
-- later deliveries to the same source verify against them. One row per handshake; several per source when the
-- sender registers several hooks (Asana: one secret per webhook).
CREATE TABLE `handshake_secrets` (
	`source` text NOT NULL,
	`secret` text NOT NULL,
	`received_at` integer NOT NULL,
	PRIMARY KEY(`source`, `secret`)
) WITHOUT ROWID;
--> statement-breakpoint
CREATE INDEX `handshake_secrets_newest` ON `handshake_secrets` (`source`, `received_at`);
