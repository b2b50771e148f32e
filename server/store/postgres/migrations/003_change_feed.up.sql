-- The change feed (store.Watcher): committed changes are announced with NOTIFY on a
-- channel named after the schema ('differently_' and 16 hex digits of its MD5, which
-- Watch computes the same way), so that replicas sharing a database, and only
-- those, hear each other. Listeners use the notifications as wake-ups and re-read.
-- Payloads: "s <sandbox id> <state>" when a sandbox is created or changes state,
-- "t <token id>" when a token is deleted, "p" when the policy is written.

CREATE FUNCTION differently_notify_sandbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state THEN
        PERFORM pg_notify('differently_' || left(md5(TG_TABLE_SCHEMA), 16), 's ' || NEW.id || ' ' || NEW.state);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER sandboxes_notify AFTER INSERT OR UPDATE ON sandboxes
    FOR EACH ROW EXECUTE FUNCTION differently_notify_sandbox();

CREATE FUNCTION differently_notify_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('differently_' || left(md5(TG_TABLE_SCHEMA), 16), 't ' || OLD.id);
    RETURN NULL;
END $$;

CREATE TRIGGER tokens_notify AFTER DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION differently_notify_token();

CREATE FUNCTION differently_notify_policy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('differently_' || left(md5(TG_TABLE_SCHEMA), 16), 'p');
    RETURN NULL;
END $$;

CREATE TRIGGER policy_notify AFTER INSERT OR UPDATE OR DELETE ON policy
    FOR EACH STATEMENT EXECUTE FUNCTION differently_notify_policy();
