"""Many testers, one library: the tester's preflight and device profile, shards of the deck, checksummed
result bundles, and the validated merge of bundles from many devices into one results/<arch>/."""
