"""System metrics while a stage runs, handed to the run's own logging function (which holds its lock)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

LogMetrics = Callable[[dict[str, float], int], None]  # (metrics, step): a tracker's log_metrics


class SystemMetrics(threading.Thread):
    """CPU, memory, disk, network and (with nvidia-ml-py and an NVIDIA GPU) GPU utilisation and memory, sampled
    every `interval` seconds by MLflow's own monitors and handed to `log` as `system/...` every `samples` samples
    (the tracker logs them through its lock: MLflow's SystemMetricsMonitor writes around it, which SQLite does
    not survive)."""

    def __init__(self, log: LogMetrics, interval: float = 2.0, samples: int = 5):
        super().__init__(name="put-system-metrics", daemon=True)
        from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
        from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
        from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

        self.log, self.interval, self.samples = log, interval, samples
        self.monitors = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
        with contextlib.suppress(Exception):  # no NVIDIA driver, or no nvidia-ml-py: no GPU metrics
            from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor

            self.monitors.append(GPUMonitor())
        self.stopped = threading.Event()
        self.step = 0

    def sample(self) -> None:
        for monitor in self.monitors:
            monitor.collect_metrics()

    def publish(self) -> None:
        values: dict[str, float] = {}
        for monitor in self.monitors:
            values.update(monitor.aggregate_metrics())
            monitor.clear_metrics()
        self.log({f"system/{k}": v for k, v in values.items()}, self.step)
        self.step += 1

    def run(self) -> None:
        while not self.stopped.is_set():
            for _ in range(self.samples):
                if self.stopped.wait(self.interval):
                    return
                self.sample()
            self.publish()

    def finish(self) -> None:
        """Stops the thread and logs what it collected since the last publication (at least one sample, so a
        short stage has its figures too)."""
        self.stopped.set()
        self.join()
        self.sample()
        self.publish()
