"""Search: discrete spaces, the strategies that propose in them, Kernel Tuner caches, and the replay scorer
that grades a strategy on a recorded cache."""
