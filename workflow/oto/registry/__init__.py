"""The experiment registry: records and protocols (:mod:`.records`), per-job files (:mod:`.job_files`),
the SQLite store (:mod:`.store`), knowledge transfer to later runs (:mod:`.transfer`) and export
(:mod:`.export`)."""
