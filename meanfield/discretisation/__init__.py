"""Spatial discretisations of the continuity equation on sphere meshes.

``base`` defines the scheme interface, ``geometry`` reads the local mesh geometry off
dolfinx, ``ghosts`` exchanges values per cell with the ghost cells, ``curved`` maps P2 cells
onto the sphere, ``fv`` is the upwind finite-volume scheme and ``dg1`` the second-order DG
scheme.  Cell quadrature lives in :mod:`meanfield.sphere`.
"""
