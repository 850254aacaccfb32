"""Generated from proto/ by tools/codegen/generate.py."""
