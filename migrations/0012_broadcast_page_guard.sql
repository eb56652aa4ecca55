-- Hand-written (drizzle cannot generate triggers): a fan-out page records its recipients only
-- while its broadcast is sending, so a page that races a cancel, or a quota stop, fails whole
-- in its own D1 batch instead of queueing emails nobody wants any more.
CREATE TRIGGER `broadcast_recipients_only_while_sending` BEFORE INSERT ON `broadcast_recipients`
WHEN NOT EXISTS (SELECT 1 FROM `broadcasts` WHERE `id` = NEW.`broadcast_id` AND `status` = 'sending')
BEGIN SELECT RAISE(ABORT, 'broadcast_not_sending'); END;
