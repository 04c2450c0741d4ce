"""The trainer's command line, slowed after step 4 so that a test can kill it
between checkpoints (tests/test_train.py)."""
import time

import torchtpu.train
from torchtpu.train.trainer import Trainer


class SlowAfterFour(Trainer):
    def on_step_end(self, step, loss):
        if step > 4:
            time.sleep(2.0)


if __name__ == "__main__":
    torchtpu.train.main(SlowAfterFour)
