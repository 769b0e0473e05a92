"""What a runtime expects, as data: tensor names, transforms, metadata and tokenizers per target.

Each target is a package of tables (one per architecture) over the frontend's ops and the io
layer's formats. Imports the frontend and io layers only.
"""
