expect 0 'kareus 0.1.0' -- --version
expect 2 'required|subcommand' -- --no-such-flag
