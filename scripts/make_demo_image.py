#!/usr/bin/python3
# Draws data/demo.png, the picture the README's demo asks about: a red
# house with a door under a yellow sun, on green grass. A plain RGB PNG,
# 160 x 120, made with PIL (python3-pil) so anyone can regenerate it.
import os
from PIL import Image, ImageDraw

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "demo.png")
img = Image.new("RGB", (160, 120), (135, 196, 235))  # sky
d = ImageDraw.Draw(img)
d.rectangle([0, 84, 159, 119], fill=(70, 150, 60))  # grass
d.ellipse([118, 10, 146, 38], fill=(250, 210, 40))  # sun
d.rectangle([40, 54, 96, 92], fill=(190, 50, 40))  # house
d.polygon([(34, 56), (68, 28), (102, 56)], fill=(110, 60, 40))  # roof
d.rectangle([62, 70, 74, 92], fill=(90, 50, 20))  # door
d.rectangle([46, 62, 56, 72], fill=(230, 240, 250))  # window
img.save(out, optimize=False)
