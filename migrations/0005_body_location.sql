-- Where a receipt's body lives when it is not in the row: 'r2' for a body above its source's r2_body_threshold,
-- kept in the BODIES bucket under the receipt id (src/bodies/stored-bodies.ts). NULL means the body is in `body`,
-- or dropped by retention. Additive: one nullable column, no index (the insert writes it, nothing searches it).
ALTER TABLE `receipts` ADD `body_location` text;
