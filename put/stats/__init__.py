"""Statistics of the evaluation: bootstrap intervals, FID's interval, multiple comparisons, the coverage study."""
