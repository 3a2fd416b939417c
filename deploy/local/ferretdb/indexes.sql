-- Run by the stack (ops/stack/services/ferretdb.py) in FerretDB's database; idempotent.
--
-- FerretDB 1.24 pushes a top-level scalar equality down as `_jsonb->'k' @> value`. Its own indexes are btree
-- expression indexes, which cannot serve `@>`; a GIN index on the same expression can (FerretDB issue 4646). The
-- application stays plain MongoDB: this event trigger gives every table FerretDB creates (one per collection, in one
-- schema per MongoDB database, created on the first write) a GIN index on `_id`, on `urn` and on `urn_keys` (the
-- normalised URNs the OPA decisions look a table's tags up by, catalog/urn_keys.py).

CREATE OR REPLACE FUNCTION public.metalake_index_ferretdb_table(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    schema_name text;
    table_name text;
    index_name text;
    key text;
BEGIN
    SELECT n.nspname, c.relname INTO schema_name, table_name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = tbl AND c.relkind = 'r';
    -- Only FerretDB's collection tables (a `_jsonb` column), not its per-schema metadata table.
    IF table_name IS NULL OR table_name = '_ferretdb_database_metadata' OR NOT EXISTS (
        SELECT FROM pg_attribute WHERE attrelid = tbl AND attname = '_jsonb' AND NOT attisdropped
    ) THEN
        RETURN;
    END IF;
    FOREACH key IN ARRAY ARRAY['_id', 'urn', 'urn_keys'] LOOP
        -- A name derived from the table (FerretDB's own index names end in `_idx`), short enough for 63 bytes.
        index_name := left(table_name, 40) || '_' || left(md5(table_name), 8) || '_gin_' || trim(leading '_' from key);
        -- fastupdate off: with GIN's pending list every lookup also scans the list of recent inserts (up to 4 MB),
        -- measured 2.5 ms against 0.05 ms for one `_id` at 20,000 documents; lookups are this index's whole job.
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON %I.%I USING gin ((_jsonb->%L)) WITH (fastupdate = off)',
            index_name, schema_name, table_name, key
        );
        -- An index made by an older version of this script.
        EXECUTE format('ALTER INDEX %I.%I SET (fastupdate = off)', schema_name, index_name);
    END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION public.metalake_ferretdb_on_create_table() RETURNS event_trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    created record;
BEGIN
    FOR created IN
        SELECT objid FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE TABLE' AND object_type = 'table'
    LOOP
        BEGIN
            PERFORM public.metalake_index_ferretdb_table(created.objid::regclass);
        EXCEPTION WHEN OTHERS THEN
            -- An error here would fail FerretDB's CREATE TABLE, i.e. the MongoDB write: a missing index is slower,
            -- not wrong, so it is only reported.
            RAISE WARNING 'metalake: no GIN index on %: %', created.objid::regclass, SQLERRM;
        END;
    END LOOP;
END
$fn$;

BEGIN;
DROP EVENT TRIGGER IF EXISTS metalake_ferretdb_gin_indexes;
CREATE EVENT TRIGGER metalake_ferretdb_gin_indexes ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
    EXECUTE FUNCTION public.metalake_ferretdb_on_create_table();
COMMIT;

-- Tables created before the trigger existed (a database set up by hand or by an older stack). One statement, so one
-- transaction, per table (psql's \gexec, autocommit): in a single statement the locks of every table and index were
-- held together, and past about 500 tenants (3,000 tables) PostgreSQL ran out of lock slots ("out of shared memory",
-- max_locks_per_transaction), so FerretDB could not start on its own data.
SELECT format('SELECT public.metalake_index_ferretdb_table(%s)', c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema'
\gexec
