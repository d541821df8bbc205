"""Scripted models the command line loads by name: ``--model scripted:cli_scripts:NAME``.

This folder (not ``tests/helpers``) is what a CLI run under test gets on its
``PYTHONPATH``, so only the modules here become importable there.
"""
