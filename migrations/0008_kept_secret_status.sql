-- A kept handshake secret is "active" (deliveries verify against it) or "pending": handed over, with the URL's
-- verify token, while the source already had an active one. Anyone who learns the verify token (it sits in the
-- registered URL, so in logs) could otherwise install a secret of their own at any time; a pending one verifies
-- nothing until an operator approves it (POST /admin/api/sources/<source>/kept-secrets/<fingerprint>/approve).
-- Rows kept before this migration were accepted under the old rule and stay active: list and revoke them.
ALTER TABLE `handshake_secrets` ADD `status` text DEFAULT 'active' NOT NULL;
