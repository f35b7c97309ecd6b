"""Reference cases for the Gaussian smoothing tests at odd sigmas (tests/nonlinear.rs).

`gaussian_weights`: scipy.ndimage.gaussian_filter1d's weights for each sigma (truncate 4),
read off as its response to a unit impulse with zero padding (the kernel is symmetric).
`gaussian_odd_*`: gaussian_filter1d (mode reflect, float64) of short and long rows, where a
radius longer than the row makes scipy reflect more than once.
"""

import numpy as np
from scipy import ndimage

from cases_stats import gaussian_case

SEED = 20261201
SIGMAS = [0.3, 1.0, 2.7, 30.0]


def weights_case():
    case = {"sigmas": np.array(SIGMAS)}
    for i, sigma in enumerate(SIGMAS):
        radius = int(4.0 * sigma + 0.5)
        impulse = np.zeros(2 * radius + 1)
        impulse[radius] = 1.0
        case[f"w{i}"] = ndimage.gaussian_filter1d(impulse, sigma, truncate=4.0, mode="constant")
    return case


def cases():
    rng = np.random.default_rng(SEED)
    return {
        "gaussian_weights": weights_case(),
        "gaussian_odd_short": gaussian_case(rng, 3, 17, SIGMAS),
        "gaussian_odd_long": gaussian_case(rng, 2, 301, SIGMAS),
    }
