// The default theme, with the home page's pipeline diagram drawn large enough to read.
import DefaultTheme from 'vitepress/theme'
import './custom.css'

export default DefaultTheme
