"""Gradient descent IK as the lecture teaches it, and a Jacobian checker built on the same pieces.

    descent.py     gradient_descent: min ||p(q) - p_bar||^2 with Armijo backtracking
    jacobians.py   check_jacobians: the engine's Jacobians against central differences of FK

The lecture's example leg is solver.examples.quadruped_leg.
"""

from .descent import ARMIJO_C, MAX_HALVINGS, GradientResult, gradient_descent, objective, point_positions
from .jacobians import JacobianCheck, check_jacobians

__all__ = ["ARMIJO_C", "MAX_HALVINGS", "GradientResult", "gradient_descent", "objective", "point_positions",
           "JacobianCheck", "check_jacobians"]
