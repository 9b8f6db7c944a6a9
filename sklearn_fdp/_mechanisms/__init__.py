"""One module per paper mechanism: what each releases, with the DpEvent it spends."""
