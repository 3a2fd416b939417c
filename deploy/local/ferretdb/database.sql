-- Run by the stack (ops/stack/services/ferretdb.py) in the maintenance database, with -v db=<name>; idempotent.
-- FerretDB refuses a database whose encoding is not UTF8 or whose collation/ctype is not C, POSIX, C.UTF-8 or
-- en_US.UTF-8; the cluster's own default follows the machine's locale, so the database names its locale itself.
SELECT format('CREATE DATABASE %I ENCODING %L LC_COLLATE %L LC_CTYPE %L TEMPLATE template0', :'db', 'UTF8', 'C.UTF-8', 'C.UTF-8')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db')
\gexec

-- FerretDB runs prepared statements (`_jsonb->$1 @> $2`); after five runs PostgreSQL may switch to a generic plan, in
-- which the key is a parameter, so the expression indexes below never match and every filter scans the table.
ALTER DATABASE :"db" SET plan_cache_mode = force_custom_plan;
