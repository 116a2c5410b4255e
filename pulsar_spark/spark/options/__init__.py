"""The connector's options: the table of every option, their value parsers, the parsed options."""
