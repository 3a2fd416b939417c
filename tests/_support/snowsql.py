"""Generated Snowflake scripts read back with sqlglot's Snowflake dialect: every statement, as tokens.

sqlglot parses masking-policy DDL as opaque commands, so the tests check the statements token by token: a quoted
identifier is one IDENTIFIER token holding exactly the name, a string literal one STRING token holding exactly the
value, and ``;`` ends a statement only where the generator put one. A name that broke out of its quotes would show
as extra tokens or statements.
"""

from __future__ import annotations

import sqlglot
from sqlglot.dialects.snowflake import Snowflake
from sqlglot.tokens import Token, TokenType


def statements(sql: str) -> list[list[Token]]:
    """The script's statements (each its tokens, without the ``;``); sqlglot must parse it as that many."""
    out: list[list[Token]] = [[]]
    for token in Snowflake().tokenize(sql):
        if token.token_type == TokenType.SEMICOLON:
            out.append([])
        else:
            out[-1].append(token)
    if not out[-1]:
        out.pop()
    parsed = [e for e in sqlglot.parse(sql, read="snowflake") if e is not None]
    assert len(parsed) == len(out), (len(parsed), len(out))
    return out


def shape(tokens: list[Token]) -> list[str]:
    """The statement as words: keywords upper-case, identifiers ``"<name>"``, strings ``'<value>'`` (unescaped)."""
    words: list[str] = []
    for token in tokens:
        if token.token_type == TokenType.IDENTIFIER:
            words.append(f'"{token.text}"')
        elif token.token_type == TokenType.STRING:
            words.append(f"'{token.text}'")
        else:
            words.append(token.text.upper())
    return words


def body_expression(sql: str) -> sqlglot.exp.Expression:
    """A policy body (``CASE ... END``) parsed as a real Snowflake expression."""
    return sqlglot.parse_one(f"SELECT {sql}", read="snowflake")


def blocks(sql: str) -> list[str]:
    """The inner text of every ``EXECUTE IMMEDIATE $$ ... $$;`` block of the script, in order."""
    out = []
    for part in sql.split("EXECUTE IMMEDIATE $$")[1:]:
        inner, sep, _ = part.partition("$$;")
        assert sep, "a block that does not end"
        out.append(inner)
    return out


def block_tokens(inner: str) -> list[Token]:
    """A block's tokens (Snowflake Scripting: sqlglot tokenizes it, it does not parse it)."""
    return list(Snowflake().tokenize(inner))
