-- Hand-written (drizzle cannot generate triggers): email_recipients mirrors each email's to, cc
-- and bcc as lower-cased bare addresses ("Name <A@b.c>" -> "a@b.c"), so the Emails page finds
-- an address's emails through an index. Triggers keep it whole on every path that inserts or
-- deletes emails (the API, batches, broadcasts, the SMTP bridge, the retention purge, account
-- deletion) without a second statement in any of them. Malformed JSON (never written) counts
-- as no recipients rather than failing the email's insert. The last statement backfills.
CREATE TRIGGER `email_recipients_on_insert` AFTER INSERT ON `emails` BEGIN
INSERT OR IGNORE INTO `email_recipients` (`account_id`, `address`, `email_id`)
SELECT NEW.`account_id`, lower(trim(rtrim(trim(substr(j.`value`, instr(j.`value`, '<') + 1)), '>'))), NEW.`id`
FROM (SELECT `value` FROM json_each(CASE WHEN json_valid(NEW.`to_json`) THEN NEW.`to_json` ELSE '[]' END)
      UNION ALL SELECT `value` FROM json_each(CASE WHEN json_valid(NEW.`cc_json`) THEN NEW.`cc_json` ELSE '[]' END)
      UNION ALL SELECT `value` FROM json_each(CASE WHEN json_valid(NEW.`bcc_json`) THEN NEW.`bcc_json` ELSE '[]' END)) AS j
WHERE typeof(j.`value`) = 'text';
END;
--> statement-breakpoint
CREATE TRIGGER `email_recipients_on_delete` AFTER DELETE ON `emails` BEGIN
DELETE FROM `email_recipients` WHERE `email_id` = OLD.`id`;
END;
--> statement-breakpoint
INSERT OR IGNORE INTO `email_recipients` (`account_id`, `address`, `email_id`)
SELECT e.`account_id`, lower(trim(rtrim(trim(substr(j.`value`, instr(j.`value`, '<') + 1)), '>'))), e.`id`
FROM `emails` AS e, json_each(CASE WHEN json_valid(e.`to_json`) THEN e.`to_json` ELSE '[]' END) AS j
WHERE typeof(j.`value`) = 'text'
UNION ALL
SELECT e.`account_id`, lower(trim(rtrim(trim(substr(j.`value`, instr(j.`value`, '<') + 1)), '>'))), e.`id`
FROM `emails` AS e, json_each(CASE WHEN json_valid(e.`cc_json`) THEN e.`cc_json` ELSE '[]' END) AS j
WHERE typeof(j.`value`) = 'text'
UNION ALL
SELECT e.`account_id`, lower(trim(rtrim(trim(substr(j.`value`, instr(j.`value`, '<') + 1)), '>'))), e.`id`
FROM `emails` AS e, json_each(CASE WHEN json_valid(e.`bcc_json`) THEN e.`bcc_json` ELSE '[]' END) AS j
WHERE typeof(j.`value`) = 'text';
