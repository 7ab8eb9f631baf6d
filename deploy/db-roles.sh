#!/bin/sh
# PostgreSQL's first start (docker-entrypoint-initdb.d, as the superuser): the owner role, which runs migrations and
# owns every table, and the runtime role the web and the worker connect as, which owns nothing (docs/deploy.md,
# "Database roles"). `manage.py db_runtime_role` then grants the runtime role what it needs, after `migrate`.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<SQL
CREATE ROLE parallax LOGIN NOSUPERUSER NOCREATEROLE PASSWORD '${PARALLAX_OWNER_PASSWORD:-parallax}';
CREATE ROLE parallax_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '${PARALLAX_APP_PASSWORD:-parallax_app}';
CREATE DATABASE parallax OWNER parallax;
SQL
