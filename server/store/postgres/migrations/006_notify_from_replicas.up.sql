-- Sandbox changes are announced by the replica that wrote them, many in one NOTIFY
-- (see notify.go), instead of by a trigger in every writing transaction:
-- PostgreSQL serialises the commits of transactions that NOTIFY, which cost the
-- busiest table its group commit. Token and policy writes are rare and keep their
-- triggers.
DROP TRIGGER sandboxes_notify ON sandboxes;
DROP FUNCTION differently_notify_sandbox();
