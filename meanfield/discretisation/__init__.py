"""Spatial discretisations of the continuity equation on sphere meshes.

``base`` defines the scheme interface, ``geometry`` reads the local mesh geometry off
dolfinx, ``quadrature`` integrates densities over cells, ``fv`` is the upwind finite-volume
scheme.
"""
