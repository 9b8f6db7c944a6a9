"""One module per paper mechanism: each returns its released values with the DpEvent it spent."""
